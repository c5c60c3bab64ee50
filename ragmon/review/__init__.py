"""ragmon.review"""

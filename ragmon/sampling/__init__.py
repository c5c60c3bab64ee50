"""ragmon.sampling"""

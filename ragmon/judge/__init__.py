"""ragmon.judge"""

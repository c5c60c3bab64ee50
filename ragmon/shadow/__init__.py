"""ragmon.shadow"""

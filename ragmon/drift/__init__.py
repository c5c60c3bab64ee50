"""ragmon.drift"""

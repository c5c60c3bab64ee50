"""ragmon.gate"""

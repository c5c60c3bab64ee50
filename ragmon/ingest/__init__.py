"""ragmon.ingest"""

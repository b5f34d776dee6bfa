"""desched.runtime"""

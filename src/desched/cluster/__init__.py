"""desched.cluster"""

"""desched.api"""

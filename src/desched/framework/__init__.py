"""desched.framework"""

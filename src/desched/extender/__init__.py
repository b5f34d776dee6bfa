"""desched.extender"""

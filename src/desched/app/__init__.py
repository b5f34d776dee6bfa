"""desched.app"""

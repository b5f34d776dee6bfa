"""desched.report"""

"""algebra"""

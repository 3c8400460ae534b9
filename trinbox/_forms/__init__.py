"""_forms"""

"""_dialects"""

"""controlplane"""

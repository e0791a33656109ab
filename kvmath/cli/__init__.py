"""Layer 8, the command line: the commands (main, trace) and what they print (output).
"""

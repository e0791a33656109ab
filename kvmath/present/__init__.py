"""Layer 7, what a reader sees: number formatting (format), the chapters' tables and equations
(report), and the browser calculator (calculator).
"""

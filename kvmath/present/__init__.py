"""Layer 7, what a reader sees: number formatting (format), the chapters' tables and equations
(report), the figures drawn from the data as SVG whose words are text (svg, figures), the
design-review section of a scenario (review) and the browser calculator (calculator).
"""

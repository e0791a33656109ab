"""Layer 6, request traces: readers (formats, statistics), the LRU curve and tier replay
(replay), and the analytic plan held against the replay (plan_vs_replay).
"""

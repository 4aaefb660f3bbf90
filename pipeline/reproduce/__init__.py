"""`genni report`: the paper's tables and figures from archived runs, and the
step-time measurements (`speed`) they cite.
"""

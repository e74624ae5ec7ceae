import os
import sys

# gdn_ref.py (the float64 oracle) lives beside the tests.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

"""The benchmark scripts live in benchmarks/ (not a package): put it on the path, as the scripts do."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))

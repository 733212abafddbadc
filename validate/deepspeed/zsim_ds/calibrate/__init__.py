"""A machine's own profile for DeepSpeed (issue 59): node.py runs the measurements in a time budget and writes the
profile (profile_yaml.py) from their figures (figures.py); predict.py predicts a session's runs with it."""

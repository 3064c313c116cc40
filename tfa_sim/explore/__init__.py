"""Exploring the schedule and the model: sweeps (``explore.sweep``) and the calibration fit."""

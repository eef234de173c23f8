"""Every command's options and main: the summ-* commands, files2rouge, and the python -m front ends the
shell scripts run."""

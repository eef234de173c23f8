"""The commands beside the package (python scripts/NAME.py): experiments/, bench/, launch/, the old command names."""

"""Pictures and pages of what a model does: attention heat maps, copy views, summ-analyze's page, attention
statistics."""

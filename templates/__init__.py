"""Report templates, shipped inside the wheel as the package envsnap.templates (see setup.cfg)."""

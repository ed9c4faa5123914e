"""spaCy pipeline components (factories stay cheap to import: heavy parts load lazily)."""

"""Claims and what decides them: the catalogue of the papers' comparative claims and its
overview table, the verdict procedure and its statistics (contrasts), chance levels, and the
coverage table's vocabulary and frame."""

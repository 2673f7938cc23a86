"""What every report package writes with: tables (CSV, Markdown, LaTeX) and figures (PNG, PDF),
the papers' printed values, the note a seeded run puts on them, the cells of a transfer study,
and the figures of pre-training and synthetic data that more than one paper shows."""

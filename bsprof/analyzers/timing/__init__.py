"""Per-warp phase timing of a bundled kernel's timing build: the event buffer's layout (``schema``),
its decoding into a table (``buffer``), the table checked (``table``) and written or read (``io``),
per-phase statistics and the SM clock fit (``stats``), and the Chrome trace (``trace``)."""

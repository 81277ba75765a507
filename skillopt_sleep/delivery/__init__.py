"""Delivery: the trained document and how it reaches an agent — the managed block and its
edits (:mod:`.document`), where an agent loads a file by itself (:mod:`.where`), and whether an
adopted document helps the user's later sessions (:mod:`.wild`)."""

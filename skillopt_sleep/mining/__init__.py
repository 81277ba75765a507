"""Mining: the user's recurring tasks from harvested sessions — requests joined into tasks
(:mod:`.mine`, :mod:`.candidates`), follow-ups read as corrections (:mod:`.corrections`), the
checks that judge an answer (:mod:`.judges`), each task's occurrences split by time
(:mod:`.split`) and similar past tasks recalled for training (:mod:`.recall`)."""

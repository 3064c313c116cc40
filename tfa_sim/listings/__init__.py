"""The stage programs as listings (docs/kernel.md, "Listings"): a listing file read (:mod:`.syntax`), what its
lines may name checked (:mod:`.check`) and its races refused (:mod:`.races`), its calls resolved (:mod:`.resolve`)
into the steps a unit issues (:mod:`.program`), its math compared with the shipped one (:mod:`.math`) or run line
by line (:mod:`.interpret`); the instructions it may use (:mod:`.isa`), the names each stage offers it
(:mod:`.vocabulary`), the listings a run uses (:mod:`.library`)."""

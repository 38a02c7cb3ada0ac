"""Files and data I/O, the infrastructure every stage may use: a file's sha256 and its memo (:mod:`.hashing`),
file-system errors named as what they are (:mod:`.storage`), a run folder's MANIFEST (:mod:`.integrity`), the one
redaction of secrets (:mod:`.redact`) and the disk cache of slow results (:mod:`.result_cache`).

They import nothing of biaslab but :mod:`biaslab.paths` and each other; this file imports none of them.
"""

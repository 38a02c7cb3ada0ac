"""Load language models: the two embedded defaults, any Hugging Face id, a local folder, or a served model
(:mod:`.embedded`, :mod:`.provenance`, :mod:`.served`, :mod:`.resolve`, :mod:`.loading`, :mod:`.tiny`).

>>> lm = load("smollm2-135m-instruct")                 # doctest: +SKIP
"""

from ..files.hashing import sha256_file
from .embedded import CONVERSION_VERSION, EMBEDDED, ModelNotFoundError, cache_folder, gguf_path, prepare, read_meta
from .loading import ModelWeightsError, load
from .provenance import loader_files, state_dict_sha256, tokenizer_sha256
from .resolve import check_device, check_dtype, check_spec, resolve_device, resolve_dtype
from .served import resolve_spec
from .tiny import save_tiny_model

__all__ = ["CONVERSION_VERSION", "EMBEDDED", "ModelNotFoundError", "ModelWeightsError", "cache_folder", "check_device",
           "check_dtype", "check_spec", "gguf_path", "load", "loader_files", "prepare", "read_meta", "resolve_device",
           "resolve_dtype", "resolve_spec", "save_tiny_model", "sha256_file", "state_dict_sha256", "tokenizer_sha256"]

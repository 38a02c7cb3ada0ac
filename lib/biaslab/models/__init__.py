"""Load language models: the two embedded defaults, any Hugging Face id, a local folder, or a served model
(:mod:`.embedded`, :mod:`.provenance`, :mod:`.served`, :mod:`.resolve`, :mod:`.loading`, :mod:`.tiny`).

>>> lm = load("smollm2-135m-instruct")                 # doctest: +SKIP
"""

from ..filehash import file_sha256, sha256_file
from .embedded import (CONVERSION_VERSION, EMBEDDED, KINDS, EmbeddedModel, ModelNotFoundError, cache_folder,
                       gguf_path, prepare, read_meta)
from .loading import LoadedModel, ModelWeightsError, load
from .provenance import (check_safetensors, files_sha256, loader_files, state_dict_sha256, tokenizer_sha256,
                         weights_sha256)
from .resolve import (DTYPES, check_device, check_dtype, check_spec, detect_kind, not_found_message, resolve_device,
                      resolve_dtype)
from .served import SERVED_DEFAULTS, ServedModel, ServedSpec, looks_served, resolve_spec
from .tiny import save_tiny_model

__all__ = ["CONVERSION_VERSION", "DTYPES", "EMBEDDED", "KINDS", "SERVED_DEFAULTS", "EmbeddedModel", "LoadedModel",
           "ModelNotFoundError", "ModelWeightsError", "ServedModel", "ServedSpec", "cache_folder", "check_device", "check_dtype",
           "check_safetensors", "check_spec", "detect_kind", "file_sha256", "files_sha256", "gguf_path",
           "load", "loader_files", "looks_served", "not_found_message", "prepare", "read_meta", "resolve_device",
           "resolve_dtype", "resolve_spec", "save_tiny_model", "sha256_file", "state_dict_sha256",
           "tokenizer_sha256", "weights_sha256"]

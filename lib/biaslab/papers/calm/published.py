"""Numbers printed in the CALM paper (Gupta et al., 2024), for side-by-side comparison only — never used as
computed results. Each table is transcribed from ``papers/calm.md``."""

import pandas as pd

#: Table 2: bias score on CALM vs. on its template perturbations
TABLE2 = pd.DataFrame({
    "model": ["T0-3B", "OPT-2.7B", "OPT-6.7B", "Bloom-3B", "Bloom-7B"],
    "bias_score": [8.1, 11.3, 13.7, 14.6, 23.0],
    "bias_score_perturbed": [8.5, 12.4, 14.6, 16.0, 23.4],
})

#: Table 3: bias score mean and sd over six runs of random prompt subsets
TABLE3 = pd.DataFrame({
    "model": ["Llama-2-7B", "Bloom-7B", "Falcon-7B", "OPT-6.7B"],
    "mean": [26.7, 23.0, 21.6, 13.7],
    "sd": [1.7, 1.6, 1.3, 1.3],
})

#: Table 4: template diversity of bias datasets (BERTScore: mean over template pairs)
TABLE4 = pd.DataFrame({
    "benchmark": ["UnQOVER", "BITS", "BEC-PRO", "DisCO", "HolisticBias", "Counter-eval", "BBQ", "CALM"],
    "n_templates": [30, 10, 5, 14, 26, 10, 325, 224],
    "bertscore": [0.660, 0.617, 0.594, 0.581, 0.489, 0.438, 0.455, 0.388],
    "length_mean": [16.9, 9.1, 6.2, 4.2, 7.1, 7.6, 20.7, 38.5],
    "length_sd": [1.8, 1.2, 1.3, 1.1, 1.6, 2.0, 2.8, 7.1],
    "length_min": [10, 7, 4, 2, 3, 2, 6, 3],
    "length_max": [24, 12, 9, 6, 14, 16, 51, 319],
})

#: Table 6 (first rows; the paper evaluates 20 models): overall, gender and race scores and per-task scores
TABLE6 = pd.DataFrame([
    ("Llama-2-7B", 26.5, 25.7, 13.3, 24.3, 39.5, 27.3, 13.4, 26.7, 41.7),
    ("Llama-2-13B", 14.2, 13.8, 7.8, 22.6, 11.1, 14.6, 8.9, 20.2, 14.7),
    ("Falcon-7B", 22.0, 20.2, 23.9, 23.3, 13.5, 23.8, 19.9, 30.2, 21.3),
    ("T0-3B", 8.0, 7.9, 6.1, 11.9, 5.8, 8.0, 7.3, 6.9, 9.9),
    ("OPT-1.3B", 24.5, 21.9, 37.8, 23.0, 5.0, 27.1, 49.7, 21.3, 10.4),
    ("Bloom-1B", 12.9, 10.4, 10.8, 9.9, None, 15.5, 13.0, 18.0, None),
    ("GPT-Neo-1.3B", 18.2, 17.7, 17.7, 14.2, 21.1, 18.7, 13.7, 14.5, 28.0),
], columns=["model", "overall", "gender", "qa_gender", "nli_gender", "sentiment_gender", "race", "qa_race",
            "nli_race", "sentiment_race"])

#: §6.1 / A.7.2 and §6.2
TEMPLATE_SUBSET = {"templates_total": 224, "templates_uninformative": 68, "templates_kept": 156,
                   "prompts_reduced": 27_300}

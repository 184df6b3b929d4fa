"""Variable naming for synthetic graphs: letters (A..Z, then A1, B1, ...) or a domain vocabulary.

Every vocabulary name is a single snake_case token (``\\w+``), so each encoding renders it bare and
the verifier's parsers read it back unchanged. Names are drawn with the item's own ``rng``.
"""

from __future__ import annotations

import random
import string

DOMAINS: dict[str, tuple[str, ...]] = {
    "medicine": (
        "smoking", "tar_deposits", "lung_cancer", "blood_pressure", "cholesterol", "heart_disease",
        "obesity", "diabetes", "insulin_level", "exercise", "diet_quality", "age", "genotype",
        "inflammation", "stroke", "kidney_function", "statin_use", "aspirin_use", "bmi", "stress",
        "sleep_quality", "alcohol_use", "liver_enzymes", "fatigue", "chest_pain", "hospital_stay",
        "recovery_time", "infection", "fever", "vaccination", "antibody_titer", "mortality",
        "air_pollution", "asthma", "medication_adherence", "sodium_intake",
    ),
    "economics": (
        "interest_rate", "inflation", "unemployment", "gdp_growth", "consumer_spending",
        "business_investment", "exports", "imports", "exchange_rate", "money_supply", "wages",
        "productivity", "oil_price", "tax_rate", "government_spending", "public_debt",
        "housing_prices", "mortgage_rates", "stock_returns", "credit_supply", "savings_rate",
        "consumer_confidence", "bank_lending", "default_rate", "minimum_wage", "labor_supply",
        "education_spending", "tariffs", "trade_balance", "commodity_prices", "household_income",
        "retail_sales", "corporate_profits", "bond_yields", "energy_costs", "rent_levels",
    ),
    "education": (
        "class_size", "teacher_experience", "tutoring", "homework_time", "test_scores",
        "attendance", "parental_income", "parental_education", "school_funding", "motivation",
        "prior_achievement", "reading_level", "math_anxiety", "peer_quality", "graduation",
        "college_enrollment", "scholarship", "study_hours", "screen_time", "sleep_hours",
        "breakfast_program", "library_access", "teacher_salary", "curriculum_quality",
        "school_climate", "bullying", "mentoring", "self_efficacy", "dropout", "gpa",
        "extracurriculars", "commute_time", "class_participation", "feedback_frequency",
        "exam_preparation", "learning_disability",
    ),
    "ecology": (
        "rainfall", "temperature", "soil_nitrogen", "plant_biomass", "herbivore_density",
        "predator_density", "insect_abundance", "pollinator_visits", "seed_set", "fire_frequency",
        "canopy_cover", "light_availability", "soil_moisture", "decomposition_rate",
        "species_richness", "invasive_species", "grazing_pressure", "nutrient_runoff",
        "algal_bloom", "dissolved_oxygen", "fish_abundance", "water_clarity", "habitat_area",
        "fragmentation", "bird_nesting", "disease_prevalence", "drought_stress", "leaf_litter",
        "fungal_biomass", "root_growth", "elevation", "snowpack", "streamflow", "beaver_dams",
        "wetland_area", "carbon_storage",
    ),
}

# Multi-word variable names (two or three words, spaces kept): a vocabulary of calver's own, so training on
# them never teaches a benchmark's network names (bnlearn's, CLEAR's, CausalGraph2LLM's).
PHRASE_HEADS: tuple[str, ...] = (
    "daily", "average", "regional", "early", "peak", "baseline", "household", "local", "annual", "relative",
    "night", "field", "shared", "remote", "seasonal", "weekly",
)
PHRASE_TAILS: tuple[str, ...] = (
    "water use", "crop yield", "noise level", "traffic flow", "sensor drift", "user churn", "server load",
    "ticket volume", "battery wear", "shelf life", "queue length", "signal strength", "fuel cost",
    "staff turnover", "repair time", "order backlog", "dust level", "pump pressure", "loan demand", "bus delay",
)
# The same kind of names written as one snake_case identifier (``peak_crop_yield``, ``wait_time``), the form
# most real variable names take, from a larger vocabulary of calver's own: a policy trained on spaced phrases
# alone meets underscores only in short identifiers. No name equals a DOMAINS name (the held-out vocabularies).
SNAKE_HEADS: tuple[str, ...] = PHRASE_HEADS + (
    "north", "south", "upstream", "downstream", "morning", "evening", "monthly", "nominal", "mean", "total",
)
SNAKE_TAILS: tuple[str, ...] = PHRASE_TAILS + (
    "cache hits", "disk usage", "packet loss", "cpu load", "memory pressure", "build time", "page views",
    "click count", "cart size", "refund count", "wait time", "shift length", "belt speed", "valve angle",
    "motor torque", "coolant flow", "paint thickness", "weld strength", "scrap count", "tool wear", "parcel weight",
    "route length", "spindle speed", "ink level", "fan speed", "login count", "query latency", "gate delay",
    "tank level", "kiln heat",
)
ID_PREFIXES: tuple[str, ...] = ("x", "v", "var", "node", "s", "u", "f", "obs", "k", "m")

NAMINGS: tuple[str, ...] = ("letters", "random_letters", "identifiers", "phrases", "snake_phrases", *DOMAINS, "mixed")


def letter_names(n: int) -> list[str]:
    """``A..Z`` then ``A1..Z1``, ``A2``, ...: the first ``n`` of that sequence."""
    letters = string.ascii_uppercase
    return [letters[i % 26] + (str(i // 26) if i >= 26 else "") for i in range(n)]


def domain_names(domain: str, n: int, rng: random.Random) -> list[str]:
    """``n`` distinct names sampled from a domain vocabulary (suffixed ``_2``, ... if it runs out)."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown naming domain {domain!r}; expected one of {', '.join(DOMAINS)}")
    vocab = DOMAINS[domain]
    out: list[str] = []
    round_ = 1
    while len(out) < n:
        take = min(len(vocab), n - len(out))
        picked = rng.sample(vocab, take)
        out += picked if round_ == 1 else [f"{p}_{round_}" for p in picked]
        round_ += 1
    return out


def random_letter_names(n: int, rng: random.Random) -> list[str]:
    """``n`` distinct letter names drawn from the whole alphabet (``A``..``Z``, then ``A1``, ...), not the
    first ``n``: a policy trained on them does not learn that graphs are named A, B, C, ..."""
    return rng.sample(letter_names(26 * (1 + (n - 1) // 26)), n)


def identifier_names(n: int, rng: random.Random) -> list[str]:
    """``n`` distinct synthetic identifiers (``x7``, ``var_qk``, ``node12``, ``obs_b3``): a prefix, an
    optional underscore and one to three lowercase letters or digits."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    out: set[str] = set()
    while len(out) < n:
        tail = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 3)))
        out.add(rng.choice(ID_PREFIXES) + rng.choice(("", "_")) + tail)
    return rng.sample(sorted(out), n)


def phrase_names(n: int, rng: random.Random) -> list[str]:
    """``n`` distinct multi-word names (``peak crop yield``) from :data:`PHRASE_HEADS` x :data:`PHRASE_TAILS`,
    or a bare tail (suffixed ``2``, ... past the vocabulary)."""
    return _multiword_names(n, rng, PHRASE_HEADS, PHRASE_TAILS, " ")


def snake_phrase_names(n: int, rng: random.Random) -> list[str]:
    """``n`` distinct snake_case multi-word names (``peak_crop_yield``, ``wait_time``) from :data:`SNAKE_HEADS` x
    :data:`SNAKE_TAILS`, or a bare tail (suffixed ``_2``, ... past the vocabulary)."""
    return _multiword_names(n, rng, SNAKE_HEADS, SNAKE_TAILS, "_")


def _multiword_names(n: int, rng: random.Random, heads: tuple[str, ...], tails: tuple[str, ...],
                     sep: str) -> list[str]:
    """``n`` distinct names drawn from the bare tails and every head + tail, words joined by ``sep``; past the
    vocabulary, tail i numbered ``2 + i // len(tails)`` (in order, so no two coincide)."""
    joined = [t.replace(" ", sep) for t in tails]
    vocab = joined + [f"{h}{sep}{t}" for h in heads for t in joined]
    picked = rng.sample(vocab, min(n, len(vocab)))
    return picked + [f"{joined[i % len(joined)]}{sep}{2 + i // len(joined)}" for i in range(n - len(picked))]


def node_names(n: int, naming: str, rng: random.Random) -> list[str]:
    """Names for ``n`` nodes, in a random order (so a name never reveals a node's topological
    position). ``naming``: ``letters`` (the first ``n``), ``random_letters``, ``identifiers``, ``phrases``
    (multi-word), ``snake_phrases`` (multi-word snake_case), a domain in :data:`DOMAINS`, or ``mixed`` (one of
    letters, random letters, identifiers, phrases and the domains, chosen per item)."""
    if naming == "mixed":
        naming = rng.choice(("letters", "random_letters", "identifiers", "phrases", *DOMAINS))
    if naming == "letters":
        names = letter_names(n)
        rng.shuffle(names)
        return names
    if naming == "random_letters":
        return random_letter_names(n, rng)
    if naming == "identifiers":
        return identifier_names(n, rng)
    if naming == "phrases":
        return phrase_names(n, rng)
    if naming == "snake_phrases":
        return snake_phrase_names(n, rng)
    return domain_names(naming, n, rng)

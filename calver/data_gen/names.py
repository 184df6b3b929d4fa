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

NAMINGS: tuple[str, ...] = ("letters", *DOMAINS, "mixed")


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


def node_names(n: int, naming: str, rng: random.Random) -> list[str]:
    """Names for ``n`` nodes, in a random order (so a name never reveals a node's topological
    position). ``naming``: ``letters``, a domain in :data:`DOMAINS`, or ``mixed`` (letters or a
    random domain, chosen per item)."""
    if naming == "mixed":
        naming = rng.choice(("letters", *DOMAINS))
    if naming == "letters":
        names = letter_names(n)
        rng.shuffle(names)
        return names
    return domain_names(naming, n, rng)

"""CITATION.cff (Citation File Format 1.2.0: this software, then the three papers under
`references`) and LICENSE (Apache-2.0). cffconvert is not a dependency: the structure is
checked here against the format's required keys."""

import tomllib

import yaml

# The papers dpvip reproduces: (first author's family name, year, CFF type, venue key, venue words).
PAPERS = {
    "ViP: A Differentially Private Foundation Model for Computer Vision": ("Yu", 2024, "conference-paper", "ICML"),
    "Differentially Private Image Classification by Learning Priors from Random Processes": (
        "Tang",
        2023,
        "conference-paper",
        "NeurIPS",
    ),
    "Towards Large Scale Transfer Learning for Differentially Private Image Classification": (
        "Mehta",
        2023,
        "article",
        "Transactions on Machine Learning Research",
    ),
}


def citation(root) -> dict:
    return yaml.safe_load((root / "CITATION.cff").read_text())


def venue(reference: dict) -> str:
    return " ".join(
        [
            reference.get("journal", ""),
            reference.get("collection-title", ""),
            reference.get("conference", {}).get("name", ""),
        ]
    )


def check_authors(authors) -> None:
    assert isinstance(authors, list) and authors
    for person in authors:
        # a person (family-names) or an entity (name), as CFF 1.2.0 allows
        assert person.get("family-names") or person.get("name"), person


def test_the_software_is_the_main_entry(root):
    cff = citation(root)
    for key in ("cff-version", "message", "title", "authors"):  # CFF 1.2.0's required keys
        assert cff.get(key), key
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["license"] == "Apache-2.0"
    check_authors(cff["authors"])
    assert str(cff["version"]) == tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]


def test_the_three_papers_are_referenced(root):
    references = {reference["title"]: reference for reference in citation(root)["references"]}
    assert set(references) == set(PAPERS)
    for title, (first_author, year, kind, venue_words) in PAPERS.items():
        reference = references[title]
        assert reference["type"] == kind and reference["year"] == year
        check_authors(reference["authors"])
        assert reference["authors"][0]["family-names"] == first_author
        assert venue_words in venue(reference), title


def test_the_license_is_apache_2(root):
    text = (root / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text

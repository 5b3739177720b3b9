"""A generated vault with typed properties, in the style many Obsidian users keep
(``categories: [[Books]]``, ``author: [[Mara Quill]]``): the relational questions of
tests/questions.json ("typed" set) are asked of it.

Every fact is stated once, as a property link; the notes' prose rarely repeats it, as
in real vaults, and daily notes mention the people and the words of the questions, so
plain full-text search has distractors to fall for. Deterministic: no randomness.
"""

from __future__ import annotations

from pathlib import Path

CITIES = {
    "Porto Salvo": "A harbour town of steep lanes and tiled facades on a river mouth.",
    "Kestrel Bay": "A windy northern port, known for fog, shipyards and a long pier.",
    "Almaden Heights": "A hill city of observatories and cold clear nights.",
    "Verenna": "A lakeside city with a silk market and a cathedral of green stone.",
    "Tobermill": "A mill town turned into a hub for small hardware workshops.",
    "Sagefield": "A desert city of wide avenues, solar farms and night markets.",
}
# name: (born in, one line)
PEOPLE = {
    "Mara Quill": (
        "Kestrel Bay",
        "Writes slow, patient prose about the sea and the people who work it.",
    ),
    "Tomas Ferreira": ("Porto Salvo", "Former ship's engineer, now a writer of long essays."),
    "Ines Dalca": ("Verenna", "Historian of trade routes and of the silk markets."),
    "Oren Vask": ("Almaden Heights", "Astronomer who turned to writing for a general audience."),
    "Lucia Brandt": (
        "Sagefield",
        "Jazz pianist and composer who grew up in a family of musicians.",
    ),
    "Devi Anand": ("Tobermill", "Engineer who started a workshop for repairable machines."),
    "Hugo Lindqvist": ("Kestrel Bay", "Film maker drawn to quiet, wintry stories."),
    "Amara Okafor": ("Porto Salvo", "Radio voice who talks with craftspeople about their work."),
    "Felix Moreau": ("Verenna", "Cellist, producer and arranger of chamber records."),
    "Sana Iqbal": ("Sagefield", "Urban planner who writes about cities built for heat."),
    "Rafael Costa": ("Almaden Heights", "Director of documentaries about science and its people."),
    "Yuki Tanabe": ("Tobermill", "Industrial designer who founded a camera company."),
    "Greta Holm": ("Kestrel Bay", "Chef who cooks with what the boats bring in."),
    "Nikolai Petrov": ("Verenna", "Interviewer who hosts long talks on history."),
    "Elena Ruiz": ("Sagefield", "Songwriter whose records mix folk and electronics."),
}
GENRES = [
    "Literary Fiction",
    "Popular Science",
    "History",
    "Essays",
    "Jazz",
    "Folk",
    "Documentary",
    "Drama",
]
# title: (author, genre, year, one-line description without the title's or author's words)
BOOKS = {
    "Tidewater Almanac": (
        "Mara Quill",
        "Literary Fiction",
        2011,
        "A year in a fishing village, told through storms, nets and the keeping of a lighthouse.",
    ),
    "The Salt Road": (
        "Ines Dalca",
        "History",
        2015,
        "How merchants carried a white mineral across mountains for a thousand years.",
    ),
    "Engines at Sea": (
        "Tomas Ferreira",
        "Essays",
        2018,
        "Reflections on diesel, steel and the men who kept cargo ships moving.",
    ),
    "A Map of Cold Stars": (
        "Oren Vask",
        "Popular Science",
        2020,
        "An accessible tour of distant galaxies and the telescopes that see them.",
    ),
    "Heat and the City": (
        "Sana Iqbal",
        "Essays",
        2022,
        "Why streets, trees and roofs decide whether a town survives summer.",
    ),
    "Silk and Ledger": (
        "Ines Dalca",
        "History",
        2019,
        "Bookkeeping, credit and fabric merchants in a medieval lakeside market.",
    ),
    "The Lamp Keeper's Daughter": (
        "Mara Quill",
        "Literary Fiction",
        2016,
        "A girl inherits a tower on a rock and a secret about a shipwreck.",
    ),
    "Notes from the Engine Room": (
        "Tomas Ferreira",
        "Essays",
        2021,
        "Short pieces on noise, oil and friendship below deck.",
    ),
    "Light Years Ago": (
        "Oren Vask",
        "Popular Science",
        2014,
        "How we know the age of the universe, explained with kitchen analogies.",
    ),
    "Shade Lines": (
        "Sana Iqbal",
        "Essays",
        2017,
        "Walking a desert town at noon to learn where people find relief.",
    ),
}
PODCASTS = {
    "Workbench Radio": (
        "Amara Okafor",
        "Conversations with carpenters, potters and weavers about their trade.",
    ),
    "Long Memory": (
        "Nikolai Petrov",
        "Three-hour interviews about empires, wars and forgotten treaties.",
    ),
    "Sky Hours": ("Oren Vask", "Weekly episodes about telescopes, planets and night observing."),
    "Fixers": ("Devi Anand", "Stories of people who repair things instead of throwing them away."),
}
ALBUMS = {
    "Blue Hour Sessions": (
        "Lucia Brandt",
        "Jazz",
        "Late night piano trio recordings made in one take.",
    ),
    "Paper Boats": ("Elena Ruiz", "Folk", "Acoustic songs layered with soft synthesizers."),
    "Quartet for Low Tide": (
        "Felix Moreau",
        "Jazz",
        "Cello and brass pieces inspired by harbour sounds.",
    ),
    "Desert Radio": ("Elena Ruiz", "Folk", "Songs recorded on a roadtrip through dry country."),
    "Late Trains": ("Lucia Brandt", "Jazz", "Solo piano improvisations about night travel."),
}
# title: (director, genre, based on, description)
FILMS = {
    "The Lighthouse Year": (
        "Hugo Lindqvist",
        "Drama",
        "Tidewater Almanac",
        "A slow winter drama on a rocky northern coast.",
    ),
    "Merchants of White": (
        "Rafael Costa",
        "Documentary",
        "The Salt Road",
        "Caravans, mines and markets filmed across three continents.",
    ),
    "Below Deck": (
        "Hugo Lindqvist",
        "Drama",
        "Engines at Sea",
        "A crew's last voyage on an old freighter.",
    ),
    "Deep Field": (
        "Rafael Costa",
        "Documentary",
        "A Map of Cold Stars",
        "Astronomers racing to photograph the faintest galaxies.",
    ),
}
COMPANIES = {
    "Tanabe Optics": (
        "Yuki Tanabe",
        "Tobermill",
        "Makes compact cameras and lenses with replaceable parts.",
    ),
    "Anand Works": (
        "Devi Anand",
        "Tobermill",
        "Builds repairable kitchen machines and sells spare parts.",
    ),
    "Verenna Instruments": (
        "Felix Moreau",
        "Verenna",
        "Hand-builds cellos and violas in a lakeside workshop.",
    ),
}
PRODUCTS = {
    "Kite M2": ("Tanabe Optics", "A rangefinder camera whose shutter can be swapped by the owner."),
    "Heron 35mm Lens": ("Tanabe Optics", "A small, bright lens for street photography."),
    "Millstone Grinder": ("Anand Works", "A coffee grinder built from screws, not glue."),
    "Atelier Cello": ("Verenna Instruments", "A concert instrument of spruce and maple."),
}
RESTAURANTS = {
    "Casa do Rio": ("Porto Salvo", "Seafood", "Grilled sardines and octopus by the river."),
    "The Net Loft": (
        "Kestrel Bay",
        "Seafood",
        "A chef-run room above the fish market, run by Greta Holm's team.",
    ),
    "Observatory Noodles": ("Almaden Heights", "Ramen", "Rich broth served late for stargazers."),
    "Green Stone Trattoria": ("Verenna", "Italian", "Handmade pasta beside the cathedral."),
    "Night Market Grill": ("Sagefield", "Street Food", "Skewers and flatbreads under lanterns."),
    "Foundry Canteen": ("Tobermill", "Vegetarian", "Lentil stews for workshop crews at noon."),
}
OWNERS = {"The Net Loft": "Greta Holm"}


def _note(root: Path, rel: str, props: dict[str, object], body: str) -> None:
    lines = ["---"]
    for key, value in props.items():
        if isinstance(value, list):
            lines.append(f"{key}:")
            lines += [f'  - "{v}"' for v in value]
        else:
            lines.append(f'{key}: "{value}"' if isinstance(value, str) else f"{key}: {value}")
    lines += ["---", body, ""]
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), "utf-8")


def _cat(name: str) -> list[str]:
    return [f"[[{name}]]"]


def generate(root: Path) -> None:
    """Write the vault under ``root`` (~100 notes)."""
    for cat in (
        "Books",
        "People",
        "Podcasts",
        "Albums",
        "Films",
        "Restaurants",
        "Cities",
        "Products",
        "Companies",
        "Genres",
    ):
        _note(
            root,
            f"Categories/{cat}.md",
            {"tags": ["categories"]},
            f"All {cat.lower()} in this vault.",
        )
    for city, text in CITIES.items():
        _note(root, f"Places/{city}.md", {"categories": _cat("Cities")}, text)
    for g in GENRES:
        _note(
            root,
            f"Genres/{g}.md",
            {"categories": _cat("Genres")},
            f"Notes filed under {g.lower()}.",
        )
    for person, (born, text) in PEOPLE.items():
        _note(
            root, f"People/{person}.md", {"categories": _cat("People"), "born": f"[[{born}]]"}, text
        )
    for title, (author, genre, year, text) in BOOKS.items():
        props = {
            "categories": _cat("Books"),
            "author": [f"[[{author}]]"],
            "genre": [f"[[{genre}]]"],
            "year": year,
            "rating": 4,
        }
        _note(
            root,
            f"Books/{title}.md",
            props,
            text + "\n\nFinished it on a train; worth a second read.",
        )
    for title, (host, text) in PODCASTS.items():
        _note(
            root,
            f"Podcasts/{title}.md",
            {"categories": _cat("Podcasts"), "host": [f"[[{host}]]"]},
            text,
        )
    for title, (artist, genre, text) in ALBUMS.items():
        _note(
            root,
            f"Albums/{title}.md",
            {"categories": _cat("Albums"), "artist": [f"[[{artist}]]"], "genre": [f"[[{genre}]]"]},
            text,
        )
    for title, (director, genre, book, text) in FILMS.items():
        props = {
            "categories": _cat("Films"),
            "director": [f"[[{director}]]"],
            "genre": [f"[[{genre}]]"],
            "based_on": f"[[{book}]]",
        }
        _note(root, f"Films/{title}.md", props, text)
    for title, (founder, city, text) in COMPANIES.items():
        _note(
            root,
            f"Companies/{title}.md",
            {"categories": _cat("Companies"), "founder": [f"[[{founder}]]"], "loc": f"[[{city}]]"},
            text,
        )
    for title, (maker, text) in PRODUCTS.items():
        _note(
            root,
            f"Products/{title}.md",
            {"categories": _cat("Products"), "maker": f"[[{maker}]]"},
            text,
        )
    for title, (city, cuisine, text) in RESTAURANTS.items():
        props: dict[str, object] = {
            "categories": _cat("Restaurants"),
            "loc": f"[[{city}]]",
            "cuisine": cuisine,
        }
        if title in OWNERS:
            props["owner"] = f"[[{OWNERS[title]}]]"
        _note(root, f"Restaurants/{title}.md", props, text)
    people = list(PEOPLE)
    for day in range(1, 29):
        a, b = people[day % len(people)], people[(day * 7 + 3) % len(people)]
        body = (
            f"Coffee with [[{a}]]; we talked about which book to write next, the film we both"
            f" liked and a podcast idea. Later a call with [[{b}]] about where the company"
            f" should be based, and which restaurant to book for the album launch.\n\n"
            f"- [ ] send [[{a}]] the notes\n- reading: a few pages before bed"
        )
        _note(root, f"Daily/2026-02-{day:02d}.md", {"tags": ["daily"]}, body)

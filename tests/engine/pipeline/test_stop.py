from conch.engine.pipeline.stop import StopChecker


def _run(stops, pieces, include=False):
    checker = StopChecker(tuple(stops), include)
    out, hit = [], None
    for piece in pieces:
        r = checker.feed(piece)
        out.append(r.text)
        if r.stopped_by:
            hit = r.stopped_by
            break
    else:
        out.append(checker.flush())
    return "".join(out), hit


def test_no_stops_passes_text_through():
    assert _run([], ["a", "b"]) == ("ab", None)


def test_stop_split_over_pieces_is_held_back_and_removed():
    checker = StopChecker(("END",))
    assert checker.feed("hello E").text == "hello "
    assert checker.feed("N").text == ""
    r = checker.feed("D and more")
    assert r.text == "" and r.stopped_by == "END"


def test_partial_match_that_fails_is_released():
    assert _run(["END"], ["hello E", "x"]) == ("hello Ex", None)


def test_include_stop_string():
    assert _run(["\n\n"], ["a\n", "\nb"], include=True) == ("a\n\n", "\n\n")


def test_earliest_of_several_stops_wins():
    assert _run(["b", "a"], ["xxab"]) == ("xx", "a")


def test_every_split_gives_the_same_result():
    text, stops = "The answer is 42. Done.", ["42.", "Done"]
    for cut in range(1, len(text)):
        assert _run(stops, [text[:cut], text[cut:]]) == ("The answer is ", "42.")

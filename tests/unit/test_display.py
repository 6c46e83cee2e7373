"""Static diagrams in notebooks: they fit the output's width and toggle to full size."""

from byoc_workbench.draw.display import HINT, Diagram, diagram_html, natural_width, readable_width

SVG = (
    '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n<!DOCTYPE svg>\n'
    '<svg width="1569pt" height="668pt" viewBox="0.00 0.00 1569.00 668.14" xmlns="http://www.w3.org/2000/svg">'
    '<g id="graph0" class="graph"><text font-size="10.00">add</text></g></svg>'
)


def test_the_diagram_fits_the_width_and_is_never_blown_up():
    html = diagram_html(SVG)
    assert natural_width(SVG) == 1569 * 4 / 3
    assert html.startswith('<div class="byoc-diagram"')
    assert "<?xml" not in html and "DOCTYPE" not in html  # a prolog inside HTML output is invalid
    assert 'width="1569pt"' not in html  # the pt size would override the fit
    assert "width:100%;height:auto;max-width:2092px;min-width:1569px" in html
    assert 'viewBox="0.00 0.00 1569.00 668.14"' in html  # keeps the aspect ratio


def test_a_click_toggles_full_size_and_the_hint_says_so():
    html = diagram_html(SVG)
    assert "onclick=" in html and "s.width=z?&#x27;100%&#x27;:&#x27;2092px&#x27;" in html
    assert HINT in html
    assert Diagram(SVG)._repr_html_() == html


def test_an_svg_without_a_pt_size_is_shown_as_it_is():
    svg = '<svg viewBox="0 0 10 10"><g/></svg>'
    assert diagram_html(svg) == f'<div class="byoc-diagram">{svg}</div>'


def test_no_label_is_drawn_under_10_px_a_wide_diagram_scrolls_instead():
    """The 10 pt labels are 13.3 px at full size: the fit stops at 75% of it, in a box that scrolls."""
    html = diagram_html(SVG)
    assert abs(readable_width(SVG) - 1569) < 1e-6  # 10 px of a 13.3 px label: three quarters of 2092 px
    least = float(html.split("min-width:")[1].split("px")[0])
    assert least / natural_width(SVG) * 10 * 4 / 3 >= 10 - 0.01  # the smallest label's height there, in px
    assert "overflow:auto" in html.split("<svg")[0]
    big = SVG.replace('font-size="10.00"', 'font-size="40.00"')
    assert abs(readable_width(big) - natural_width(big) * 10 / (40 * 4 / 3)) < 1e-6  # big labels shrink more
    assert readable_width('<svg viewBox="0 0 1 1"/>') is None

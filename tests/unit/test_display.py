"""Static diagrams in notebooks: they fit the output's width and toggle to full size."""

from byoc_workbench.draw.display import HINT, Diagram, diagram_html, natural_width

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
    assert "width:100%;height:auto;max-width:2092px" in html
    assert 'viewBox="0.00 0.00 1569.00 668.14"' in html  # keeps the aspect ratio


def test_a_click_toggles_full_size_and_the_hint_says_so():
    html = diagram_html(SVG)
    assert "onclick=" in html and "s.width=z?&#x27;100%&#x27;:&#x27;2092px&#x27;" in html
    assert HINT in html
    assert Diagram(SVG)._repr_html_() == html


def test_an_svg_without_a_pt_size_is_shown_as_it_is():
    svg = '<svg viewBox="0 0 10 10"><g/></svg>'
    assert diagram_html(svg) == f'<div class="byoc-diagram">{svg}</div>'

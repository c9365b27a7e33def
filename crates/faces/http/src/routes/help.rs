//! The project's guides served by the binary under `/admin/help/`: each
//! guide of `docs/` rendered from Markdown into the console's layout, with
//! links between pages and their anchors kept, so help texts in the console
//! link to pages the running service has (docs/console.md). The project's
//! engineering notes (reliability, performance, decisions, architecture)
//! stay in the repository: they cite the contract and the work's history,
//! which mean nothing to the people running the service.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd, html};

/// A page of the documentation: its slug (the file's name without `.md`),
/// and its Markdown.
pub(crate) struct Doc {
    pub slug: &'static str,
    pub markdown: &'static str,
}

macro_rules! doc {
    ($slug:literal) => {
        Doc {
            slug: $slug,
            markdown: include_str!(concat!("../../../../../docs/", $slug, ".md")),
        }
    };
}

/// The guides, in the order the index lists them.
pub(crate) const DOCS: [Doc; 17] = [
    doc!("console"),
    doc!("schema"),
    doc!("data-api"),
    doc!("workflows"),
    doc!("own-logic"),
    doc!("dataviews"),
    doc!("auth"),
    doc!("oauth"),
    doc!("realtime"),
    doc!("files"),
    doc!("email"),
    doc!("mcp"),
    doc!("clients"),
    doc!("admin-api"),
    doc!("environments"),
    doc!("embedding"),
    doc!("operations"),
];

/// A page's title: its first heading's text, as Markdown has it (escape
/// it for HTML with [`escape`]).
pub(crate) fn title(markdown: &str) -> &str {
    markdown
        .lines()
        .find_map(|line| line.strip_prefix("# "))
        .unwrap_or("Documentation")
        .trim()
}

/// The anchor GitHub gives a heading: lower case, spaces as `-`, only
/// letters, digits, `-` and `_` kept.
fn anchor(text: &str) -> String {
    text.chars()
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Where a link of a page points once served: another page of [`DOCS`]
/// (`data-api.md#x` becomes `{base}/admin/help/data-api#x`), an anchor of
/// the same page, or an outside address; `None` for a file the service does
/// not serve (the link is dropped, its text kept).
fn target(base: &str, destination: &str) -> Option<String> {
    if destination.starts_with('#') || destination.starts_with("https://") {
        return Some(destination.to_owned());
    }
    let (file, fragment) = destination
        .split_once('#')
        .map_or((destination, ""), |(f, a)| (f, a));
    let slug = file.strip_suffix(".md")?;
    DOCS.iter().find(|doc| doc.slug == slug)?;
    let fragment = if fragment.is_empty() {
        String::new()
    } else {
        format!("#{fragment}")
    };
    Some(format!("{base}/admin/help/{slug}{fragment}"))
}

/// `markdown` as HTML: tables and strike-through on, each heading given its
/// anchor, links rewritten by [`target`], tables and code blocks in boxes
/// that scroll and take the focus.
pub(crate) fn render(base: &str, markdown: &str) -> String {
    let events: Vec<Event<'_>> = Parser::new_ext(
        markdown,
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH,
    )
    .collect();
    let mut out = Vec::with_capacity(events.len());
    let mut dropped = 0usize;
    let mut index = 0;
    while index < events.len() {
        match &events[index] {
            Event::Start(Tag::Heading {
                level,
                classes,
                attrs,
                ..
            }) => {
                let text: String = events[index + 1..]
                    .iter()
                    .take_while(|e| !matches!(e, Event::End(TagEnd::Heading(_))))
                    .filter_map(|e| match e {
                        Event::Text(t) | Event::Code(t) => Some(t.as_ref()),
                        _ => None,
                    })
                    .collect();
                out.push(Event::Start(Tag::Heading {
                    level: *level,
                    id: Some(CowStr::from(anchor(&text))),
                    classes: classes.clone(),
                    attrs: attrs.clone(),
                }));
            }
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) => match target(base, dest_url) {
                Some(url) => out.push(Event::Start(Tag::Link {
                    link_type: *link_type,
                    dest_url: CowStr::from(url),
                    title: title.clone(),
                    id: id.clone(),
                })),
                None => dropped += 1,
            },
            Event::End(TagEnd::Link) if dropped > 0 => dropped -= 1,
            // HTML in the Markdown is shown as text, never passed through.
            Event::Html(raw) | Event::InlineHtml(raw) => out.push(Event::Text(raw.clone())),
            other => out.push(other.clone()),
        }
        index += 1;
    }
    let mut text = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut text, out.into_iter());
    // Tables and code scroll sideways in boxes that take the focus, so
    // keyboards can scroll them too.
    // A column's alignment is a class: the pages' CSP allows no inline style.
    text.replace("<table>", "<div class=\"scroll\" tabindex=\"0\"><table>")
        .replace("</table>", "</table></div>")
        .replace("<pre>", "<pre tabindex=\"0\">")
        .replace(" style=\"text-align: left\"", " class=\"left\"")
        .replace(" style=\"text-align: center\"", " class=\"center\"")
        .replace(" style=\"text-align: right\"", " class=\"right\"")
}

/// The index of the documentation: the guides.
pub(crate) fn index(base: &str) -> String {
    let list = DOCS
        .iter()
        .map(|doc| {
            format!(
                "<li><a href=\"{base}/admin/help/{}\">{}</a></li>",
                doc.slug,
                escape(title(doc.markdown))
            )
        })
        .collect::<String>();
    format!(
        "<div class=\"heading\"><h1>Documentation</h1><p class=\"lede\">How Tessera works and how to run it: the guides of the project's <code>docs/</code>, served by this binary.</p></div>\
         <div class=\"sections\"><section aria-labelledby=\"guides\"><h2 id=\"guides\">Guides</h2><ul>{list}</ul></section></div>"
    )
}

/// `text` safe inside HTML.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    html::push_html(&mut out, std::iter::once(Event::Text(CowStr::from(text))));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_between_pages_keep_their_anchor_and_others_are_dropped() {
        let html = render(
            "/base",
            "# T\n\nSee [rows](data-api.md#related-rows), [here](#t), [API](../shared/API.md) and [x](https://example.com).",
        );
        assert!(html.contains("<h1 id=\"t\">T</h1>"), "{html}");
        assert!(html.contains("href=\"/base/admin/help/data-api#related-rows\""));
        assert!(html.contains("href=\"#t\""));
        assert!(!html.contains("API.md"), "{html}");
        assert!(html.contains(", API and"), "{html}");
        assert!(html.contains("href=\"https://example.com\""));
    }

    #[test]
    fn html_is_shown_as_text_and_alignment_is_a_class() {
        let html = render(
            "",
            "Send <token> here.\n\n<script>x</script>\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n",
        );
        assert!(html.contains("Send &lt;token&gt; here."), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(!html.contains("style="), "{html}");
        assert!(html.contains("<td class=\"right\">2</td>"), "{html}");
    }

    #[test]
    fn headings_get_the_anchors_github_gives_them() {
        assert_eq!(anchor("Related rows (embed)"), "related-rows-embed");
        assert_eq!(anchor("Console, issue 18"), "console-issue-18");
        assert!(render("", "## `forEach` loops").contains("id=\"foreach-loops\""));
    }

    #[test]
    fn every_page_has_a_title_and_renders() {
        for doc in &DOCS {
            assert_ne!(title(doc.markdown), "Documentation", "{}", doc.slug);
            assert!(render("", doc.markdown).contains("<h1"), "{}", doc.slug);
        }
    }
}

"""The HTML report's view builders, one module per part of the page: each turns its part of the diff result
(model/result_types.DiffResult) into display-ready plain data for templates/report.html.j2; render/html.py
puts them together. common.py holds their one vocabulary: row caps and value formatting."""

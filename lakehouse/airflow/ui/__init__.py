"""The Lakehouse view of the Airflow plugin: table overviews, the timeline chart, the pages and the app."""

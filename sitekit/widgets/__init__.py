"""The site's interactive widgets: one module per widget, printing the element its script builds."""
